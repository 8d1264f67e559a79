"""The chaos checker's concurrency invariant (decision 0057), from the histories alone:

* no limit key ever has more holders at once than its max: a run holds a slot of its limit from
  its ``ConcurrencySlotAcquired`` to its close, an activity from its own to its close (event
  times; a holder's interval in its history lies inside the owner's, so an overlap here is an
  overlap there);
* a run's code runs only once it holds every limit its start names (no ``WorkflowTaskScheduled``
  before the last acquisition), and an activity completes only after it held its limits;
* each slot is acquired once per run (or per activity): a grant applied twice would show twice;
* a rate limit (decision 0058; its admissions carry ``per_ms`` and ``not_before_ms``) admits at
  most its max in any window of ``per_ms`` (by the admission times its owner gave), and a run's
  code runs no earlier than its admission.
"""

from __future__ import annotations

import collections

__all__ = ["holder_intervals", "most_at_once", "most_in_a_window", "rate_admissions", "slot_violations"]

_ACTIVITY_CLOSES = ("ActivityTaskCompleted", "ActivityTaskFailed", "ActivityTaskTimedOut", "ActivityTaskCanceled")


def _kind(e: dict) -> str:
    return e["attributes"][0]


def _attrs(e: dict) -> dict:
    return e["attributes"][1]


def most_at_once(intervals: list[tuple[int, int]]) -> int:
    """The most intervals open at one instant (one that ends as another begins does not overlap)."""
    points = sorted([(a, 1) for a, _b in intervals] + [(b, -1) for _a, b in intervals])
    now = top = 0
    for _t, step in points:
        now += step
        top = max(top, now)
    return top


def most_in_a_window(times: list[int], window_ms: int) -> int:
    """The most of ``times`` in any half-open window ``[t, t + window_ms)``."""
    times = sorted(times)
    top, lo = 0, 0
    for hi, at in enumerate(times):
        while times[lo] <= at - window_ms:
            lo += 1
        top = max(top, hi - lo + 1)
    return top


def _rate_key(a: dict) -> str:
    return f"{a['name']}={a['value']} (rate)"


def rate_admissions(histories: dict) -> tuple[dict, dict, list[tuple[str, str, str]]]:
    """(rate key -> [admission times], rate key -> (max, per_ms), [(workflow, run, problem)]):
    the admissions of every rate limit, and each run whose first workflow task came before its
    admission."""
    times: dict[str, list[int]] = collections.defaultdict(list)
    limits: dict[str, tuple[int, int]] = {}
    problems: list[tuple[str, str, str]] = []
    for (wf, run), events in sorted(histories.items()):
        admitted_at = 0
        for e in events:
            kind, a = _kind(e), _attrs(e)
            if kind == "ConcurrencySlotAcquired" and a.get("per_ms") is not None:
                times[_rate_key(a)].append(a["not_before_ms"])
                limits[_rate_key(a)] = (a["max"], a["per_ms"])
                if a["activity_id"] is None:
                    admitted_at = max(admitted_at, a["not_before_ms"])
            elif kind == "WorkflowTaskScheduled" and e["timestamp_ms"] < admitted_at:
                problems.append((wf, run, f"workflow task (seq {e['seq']}) before its admission at {admitted_at}"))
                break
    return times, limits, problems


def holder_intervals(histories: dict) -> tuple[dict, dict, list[tuple[str, str, str]]]:
    """(key -> [(acquired, released)], key -> max, [(workflow, run, problem)])."""
    spans: dict[str, list[tuple[int, int]]] = collections.defaultdict(list)
    maxes: dict[str, int] = {}
    problems: list[tuple[str, str, str]] = []
    for (wf, run), events in sorted(histories.items()):
        end = events[-1]["timestamp_ms"] if _kind(events[-1]).startswith("WorkflowExecution") else 2**62
        closes = {_attrs(e)["activity_id"]: e["timestamp_ms"] for e in events if _kind(e) in _ACTIVITY_CLOSES}
        acquired = collections.Counter()
        for e in events:
            if _kind(e) != "ConcurrencySlotAcquired":
                continue
            a = _attrs(e)
            if a.get("per_ms") is not None:  # a rate limit's admission holds nothing: rate_admissions
                acquired[(_rate_key(a), a["activity_id"])] += 1
                continue
            key = f"{a['name']}={a['value']}"
            maxes[key] = a["max"]
            acquired[(key, a["activity_id"])] += 1
            released = end if a["activity_id"] is None else closes.get(a["activity_id"], end)
            spans[key].append((e["timestamp_ms"], released))
        problems += [
            (wf, run, f"slot of {k} acquired {n} times (activity {aid})") for (k, aid), n in acquired.items() if n > 1
        ]
        problems += _order_problems(wf, run, events)
    return spans, maxes, problems


def _limit_key(lim: dict) -> str:
    return _rate_key(lim) if lim.get("per_ms") is not None else f"{lim['name']}={lim['value']}"


def _order_problems(wf: str, run: str, events: list[dict]) -> list[tuple[str, str, str]]:
    """A run's code before its slots, an activity's completion before its slots."""
    out = []
    started = _attrs(events[0]) if _kind(events[0]) == "WorkflowExecutionStarted" else {}
    wanted = {_limit_key(lim) for lim in started.get("concurrency") or ()}
    held: set[str] = set()
    by_activity: dict[str, set[str]] = collections.defaultdict(set)
    limits_of: dict[str, set[str]] = {}
    inherited = bool(started.get("continued_from_run_id"))  # a chain's next run keeps its slots
    for e in events:
        kind, a = _kind(e), _attrs(e)
        if kind == "ConcurrencySlotAcquired":
            key = _limit_key(a)
            (held if a["activity_id"] is None else by_activity[a["activity_id"]]).add(key)
        elif kind == "WorkflowTaskScheduled" and not inherited and wanted - held:
            out.append((wf, run, f"workflow task (seq {e['seq']}) before the slots of {sorted(wanted - held)}"))
            break
        elif kind == "ActivityTaskScheduled":
            limits_of[a["activity_id"]] = {_limit_key(lim) for lim in a["options"].get("concurrency") or ()}
        elif kind == "ActivityTaskCompleted" and limits_of.get(a["activity_id"], set()) - by_activity[a["activity_id"]]:
            missing = sorted(limits_of[a["activity_id"]] - by_activity[a["activity_id"]])
            out.append((wf, run, f"activity {a['activity_id']} completed without the slots of {missing}"))
    return out


def slot_violations(histories: dict, *, limited_runs: int) -> list[tuple[tuple[str, ...], str]]:
    """((workflow IDs...), message) for every breach; ``limited_runs``: starts that named a limit
    (the load's), so that a campaign in which nothing was limited is a failure, not a pass."""
    spans, maxes, problems = holder_intervals(histories)
    out = [((wf, run), message) for wf, run, message in problems]
    for key, intervals in sorted(spans.items()):
        top = most_at_once(intervals)
        if top > maxes[key]:
            out.append(((), f"limit {key}: {top} holders at once, its max is {maxes[key]}"))
    admitted, rates, late = rate_admissions(histories)
    out += [((wf, run), message) for wf, run, message in late]
    for key, at in sorted(admitted.items()):
        top, per = rates[key]
        seen = most_in_a_window(at, per)
        if seen > top:
            out.append(((), f"limit {key}: {seen} admitted in a window of {per} ms, its max is {top}"))
    if limited_runs and not spans and not admitted:
        out.append(((), f"{limited_runs} starts named a concurrency limit and no slot was ever acquired"))
    return out
