"""Message and collective matching in pandas: the reference for the native reader.

The reader matches in C (analyzer/native/reader.c, `match`) because it is on the hot
path; these vectorized versions state the same rules in a few lines and the tests check
the C results against them on generated traces."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mpiscope.archive.schema import SCHEMA

MESSAGE_COLS = SCHEMA.tables["messages"].names
KEY = ["send_rank", "recv_rank", "comm", "tag"]


def _request_call(p2p: pd.DataFrame, event: str, rows: pd.DataFrame) -> np.ndarray:
    """For non-blocking rows, the call of the matching `event` with the same request id."""
    ref = p2p.loc[p2p["event"] == event, ["rank", "request", "call", "time"]]
    ref = ref.drop_duplicates(["rank", "request"], keep="last")
    merged = rows[["rank", "request"]].merge(ref, on=["rank", "request"], how="left")
    return merged["call"].fillna(-1).astype(np.int64).to_numpy()


def match_messages(p2p: pd.DataFrame, calls: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Sends matched to receives in MPI order: FIFO per (sender, receiver, comm, tag).

    Receives are ordered by when they were posted (the Irecv, not its Wait), as MPI
    matches them. Returns (messages, unmatched)."""
    sends = p2p[p2p["event"].isin(["send", "isend"])].copy()
    recvs = p2p[p2p["event"].isin(["recv", "irecv"])].copy()
    # posting call of a send is the call holding its event; completion via the request
    sends["post_call"] = sends["call"]
    iso = sends["event"] == "isend"
    sends["complete_call"] = sends["call"]
    if iso.any():
        done = _request_call(p2p, "isend_complete", sends.loc[iso])
        sends.loc[iso, "complete_call"] = np.where(done >= 0, done, sends.loc[iso, "call"])
    recvs["complete_call"] = recvs["call"]
    recvs["post_call"] = recvs["call"]
    iro = recvs["event"] == "irecv"
    if iro.any():
        posted = _request_call(p2p, "irecv_request", recvs.loc[iro])
        recvs.loc[iro, "post_call"] = np.where(posted >= 0, posted, recvs.loc[iro, "call"])
    starts = calls["start"].to_numpy()
    ends = calls["end"].to_numpy()

    def at(arr: np.ndarray, idx: pd.Series) -> np.ndarray:
        i = idx.to_numpy()
        return np.where(i >= 0, arr[np.clip(i, 0, max(len(arr) - 1, 0))], -1) if len(arr) \
            else np.full(len(i), -1)

    sends = sends.rename(columns={"rank": "send_rank", "peer": "recv_rank"})
    recvs = recvs.rename(columns={"rank": "recv_rank", "peer": "send_rank"})
    sends["post_time"] = at(starts, sends["post_call"])
    recvs["post_time"] = at(starts, recvs["post_call"])
    sends = sends.sort_values(KEY + ["post_time", "time"], kind="stable")
    recvs = recvs.sort_values(KEY + ["post_time", "time"], kind="stable")
    sends["seq"] = sends.groupby(KEY, sort=False).cumcount()
    recvs["seq"] = recvs.groupby(KEY, sort=False).cumcount()
    m = sends.merge(recvs, on=KEY + ["seq"], how="outer", suffixes=("_s", "_r"), indicator=True)
    both = m[m["_merge"] == "both"]
    messages = pd.DataFrame({
        "send_rank": both["send_rank"].astype(np.int32),
        "recv_rank": both["recv_rank"].astype(np.int32),
        "comm": both["comm"].astype(np.int32), "tag": both["tag"].astype(np.int32),
        "bytes": both["bytes_s"].astype(np.int64),
        "send_call": both["post_call_s"].astype(np.int64),
        "recv_call": both["post_call_r"].astype(np.int64),
        "send_complete_call": both["complete_call_s"].astype(np.int64),
        "recv_complete_call": both["complete_call_r"].astype(np.int64),
        "send_time": both["time_s"].astype(np.int64),
        "recv_time": both["time_r"].astype(np.int64),
    })
    messages["send_enter"] = at(starts, messages["send_call"])
    messages["recv_enter"] = at(starts, messages["recv_call"])
    messages["recv_leave"] = at(ends, messages["recv_complete_call"])
    messages = messages.sort_values("send_time", kind="stable").reset_index(drop=True)
    left = m[m["_merge"] != "both"]
    is_send = left["_merge"] == "left_only"
    unmatched = pd.DataFrame({
        "rank": np.where(is_send, left["send_rank"], left["recv_rank"]).astype(np.int32),
        "event": np.where(is_send, left["event_s"], left["event_r"]),
        "peer": np.where(is_send, left["recv_rank"], left["send_rank"]).astype(np.int32),
        "comm": left["comm"].astype(np.int32), "tag": left["tag"].astype(np.int32),
        "bytes": np.where(is_send, left["bytes_s"], left["bytes_r"]).astype(np.int64),
        "call": np.where(is_send, left["post_call_s"], left["post_call_r"]).astype(np.int64),
    }).reset_index(drop=True)
    return messages[MESSAGE_COLS], unmatched


def collectives(calls: pd.DataFrame) -> pd.DataFrame:
    """One row per rank per blocking collective call; `instance` joins the ranks' rows."""
    coll = calls[calls["coll_seq"] >= 0]
    out = coll[[c for c in SCHEMA.tables["collectives"].names if c != "instance"]].copy()
    out["instance"] = out.groupby(["comm", "coll_seq"], sort=True).ngroup().astype(np.int64)
    return out.reset_index(drop=True)
