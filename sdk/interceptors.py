"""Interceptors: code that runs around every client call, activity and workflow handler.

A class derived from ``Interceptor`` overrides the methods it needs; each receives the call and
``nxt``, the rest of the chain, and returns what ``nxt(call)`` returns (or raises instead)::

    class Audit(Interceptor):
        async def intercept_client(self, call, nxt):
            call.headers["user"] = current_user()            # travels with a start
            return await nxt(call)

        async def intercept_activity(self, call, nxt):
            with auth_context(call.info.headers.get("user")):  # the start's headers, on every activity
                return await nxt(call)

    client = await Client.connect(interceptors=[Audit()])    # its Workers use them too

* ``intercept_client``: every ``Client`` / ``WorkflowHandle`` operation (``call.operation``:
  ``start_workflow``, ``signal_with_start``, ``update_with_start``, ``signal``, ``query``,
  ``update``, ``cancel``, ``terminate``, ``result``, ``describe``). ``call.headers`` set for a
  start are recorded with the run (``WorkflowExecutionStarted.headers``) and given to the
  workflow (``workflow.info().headers``), to each of its activities (``activity.info().headers``)
  and to its children.
* ``intercept_activity``: each activity attempt on a worker, with its typed arguments.
* ``intercept_workflow``: the workflow's run method and its signal, query, update and validator
  handlers (``call.kind``). It runs inside workflow code, on the deterministic loop and again on
  every replay: it must be deterministic and do no I/O (count, check, set context). It is a
  plain method: ``nxt(call)`` returns what the handler returns (a coroutine for ``run``, async
  handlers and async updates; a value for queries, validators and sync handlers), which it must
  return as it is.

The first interceptor of the list is the outermost.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

# (chain and invoke_activity are the SDK's own)
__all__ = ["ActivityCall", "ClientCall", "Interceptor", "WorkflowCall"]


@dataclass
class ClientCall:
    operation: str
    workflow_id: str
    #: the workflow type (starts), or the signal, query or update name
    name: str | None = None
    args: tuple[Any, ...] = ()
    #: sent with a start (start_workflow, signal_with_start, update_with_start); else unused
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class ActivityCall:
    info: Any  # kadence.activity.ActivityInfo
    fn: Callable[..., Any]
    args: list[Any]


@dataclass
class WorkflowCall:
    #: "run", "signal", "query", "update" or "validator"
    kind: str
    info: Any  # kadence.workflow.WorkflowInfo
    name: str
    args: list[Any]


class Interceptor:
    """Override what you need; the defaults pass the call on unchanged."""

    async def intercept_client(self, call: ClientCall, nxt: Callable[[ClientCall], Awaitable[Any]]) -> Any:
        return await nxt(call)

    async def intercept_activity(self, call: ActivityCall, nxt: Callable[[ActivityCall], Awaitable[Any]]) -> Any:
        return await nxt(call)

    def intercept_workflow(self, call: WorkflowCall, nxt: Callable[[WorkflowCall], Any]) -> Any:
        return nxt(call)


def _overrides(ic: Interceptor, name: str) -> bool:
    return getattr(type(ic), name, None) is not getattr(Interceptor, name)


async def invoke_activity(
    interceptors: Iterable[Interceptor],
    defn: Any,
    info: Any,
    args: list[Any],
    run_sync: Callable[[Callable[..., Any], list[Any]], Awaitable[Any]],
) -> Any:
    """An activity attempt through the interceptors: ``defn.fn`` awaited, or a sync one given to
    ``run_sync(fn, args)`` (a thread)."""

    async def innermost(call: ActivityCall) -> Any:
        if defn.is_async:
            return await call.fn(*call.args)
        return await run_sync(call.fn, call.args)

    return await chain(interceptors, "intercept_activity", innermost)(ActivityCall(info, defn.fn, list(args)))


def chain(interceptors: Iterable[Interceptor], method: str, innermost: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``innermost`` wrapped by the interceptors that override ``method`` (the first outermost);
    with none, ``innermost`` itself (nothing is added to a call no interceptor wants)."""
    call = innermost
    for ic in reversed([ic for ic in interceptors if _overrides(ic, method)]):
        call = (lambda bound, nxt: lambda c: bound(c, nxt))(getattr(ic, method), call)
    return call
