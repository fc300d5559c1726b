// Clicking a finding zooms its panel's timeline. The buttons are not Dash callback inputs
// on purpose: they appear only when the analyses are done, and a callback input that a
// pending callback creates would hold every zoom and pan back until then.
document.addEventListener("click", (ev) => {
  const b = ev.target.closest("button.finding");
  if (!b || !window.dash_clientside || !window.dash_clientside.set_props) return;
  window.dash_clientside.set_props("finding-click-" + b.dataset.panel,
                                   {data: {idx: Number(b.dataset.idx), at: Date.now()}});
  window.scrollTo({top: 0});
});
