// Every table's CSV export with a header line of plain text. The headers on the page
// carry soft hyphens where a long word may break in a narrow table (windowstats.COLUMNS),
// and Dash's DataTable exports the headers as shown; a spreadsheet would keep them as
// characters. The DataTable writes its file with SheetJS, which hands it to a global
// saveAs where there is one (FileSaver.js's convention): here the header line loses its
// invisible characters (format characters such as U+00AD, zero-width spaces and joiners,
// bidi marks; control characters; private-use and unassigned code points), its other
// spaces become plain ones, and the file downloads as SheetJS would have.
(function () {
  const INVISIBLE = /[\p{Cc}\p{Cf}\p{Co}\p{Cn}]/gu;
  const SPACES = /(?! )\p{Z}/gu;  // no-break, thin, line and paragraph separators
  const BOM = "\ufeff";  // SheetJS writes it first: Excel reads the CSV as UTF-8 by it

  function download(blob, name) {
    const url = URL.createObjectURL(blob);
    const a = document.createElement("a");
    a.download = name;
    a.href = url;
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
  }

  // the text up to the end of the first record: a newline outside quotes
  function headerEnd(text, from) {
    let quoted = false;
    for (let i = from; i < text.length; i++) {
      if (text[i] === '"') quoted = !quoted;
      else if (text[i] === "\n" && !quoted) return i;
    }
    return text.length;
  }

  window.saveAs = function (blob, name) {
    if (!/\.csv$/i.test(name)) {
      download(blob, name);
      return;
    }
    blob.arrayBuffer().then((buf) => {
      const text = new TextDecoder("utf-8", {ignoreBOM: true}).decode(buf);
      const start = text.startsWith(BOM) ? 1 : 0;
      const end = headerEnd(text, start);
      const header = text.slice(start, end).replace(INVISIBLE, "").replace(SPACES, " ");
      download(new Blob([BOM + header + text.slice(end)], {type: "text/csv"}), name);
    });
  };
})();
