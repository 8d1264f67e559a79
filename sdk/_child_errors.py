"""The error a child workflow's outcome event gives the parent's code (``ChildWorkflowError``)."""

from __future__ import annotations

from typing import Any

from kadence.topics.errors import ChildWorkflowError
from kadence.topics.payload import PayloadConverter

__all__ = ["child_error"]


def child_error(kind: str, attrs: dict[str, Any], converter: PayloadConverter) -> ChildWorkflowError:
    """The error of a child that could not start (``StartChildWorkflowExecutionFailed``) or did
    not complete (``ChildWorkflowExecutionFailed``: failed, canceled, terminated, timed out);
    its cause the child's failure as an exception."""
    if kind == "StartChildWorkflowExecutionFailed":
        return ChildWorkflowError(
            f"child workflow {attrs['workflow_id']} could not start: {attrs['cause']}",
            workflow_id=attrs["workflow_id"],
            run_id=attrs["run_id"],
            status="start_failed",
        )
    failure = attrs["failure"]
    err = ChildWorkflowError(
        f"child workflow {attrs['workflow_id']} {attrs['status']}: {failure['message']}",
        workflow_id=attrs["workflow_id"],
        run_id=attrs["run_id"],
        status=attrs["status"],
        failure=failure,
    )
    err.__cause__ = converter.exception(failure)
    return err
