"""Kubernetes `Status` errors, shaped exactly like kube-apiserver's.

Clients branch on `reason`, `code` and `details`, and print `message` verbatim, so the wording
follows apimachinery's `errors` and `field` packages rather than anything of our own.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

Body = dict[str, Any]

#: kube-apiserver's reasons for the HTTP codes clients act on (apimachinery StatusReason*).
REASONS: dict[int, str] = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class ApiError(Exception):
    """A failed request, rendered as a `kind: Status` body with the given HTTP code."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: Body | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}

    def status(self) -> Body:
        body: Body = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
        }
        if self.details is not None:
            body["details"] = self.details
        body["code"] = self.code
        return body


def _details(group: str, kind: str, name: str, **extra: Any) -> Body:
    # Go's omitempty drops empty strings, so an absent group is not "group": "".
    details: Body = {}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    if kind:
        details["kind"] = kind
    details.update({k: v for k, v in extra.items() if v})
    return details


def qualified(resource: str, group: str) -> str:
    return f"{resource}.{group}" if group else resource


def not_found(group: str, resource: str, name: str) -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f"{qualified(resource, group)} {json.dumps(name)} not found",
        _details(group, resource, name),
    )


def no_such_route() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource", {})


def already_exists(group: str, resource: str, name: str) -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f"{qualified(resource, group)} {json.dumps(name)} already exists",
        _details(group, resource, name),
    )


def conflict(group: str, resource: str, name: str, why: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f"Operation cannot be fulfilled on {qualified(resource, group)} {json.dumps(name)}: {why}",
        _details(group, resource, name),
    )


STALE = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def forbidden(group: str, resource: str, name: str, why: str) -> ApiError:
    target = (
        f"{qualified(resource, group)} {json.dumps(name)}" if name else qualified(resource, group)
    )
    return ApiError(
        403, "Forbidden", f"{target} is forbidden: {why}", _details(group, resource, name)
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def method_not_allowed() -> ApiError:
    return ApiError(
        405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
    )


def unsupported_media_type(accepted: list[str]) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: "
        + ", ".join(accepted),
    )


def expired(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def internal(message: str) -> ApiError:
    return ApiError(
        500,
        "InternalError",
        f"Internal error occurred: {message}",
        {"causes": [{"message": message}]},
    )


def generic(code: int, message: str = "", retry_after: int = 0) -> ApiError:
    """An error for an arbitrary code, as clients see one injected or from a proxy."""
    reason = REASONS.get(code, "Unknown")
    text = message or f"the server responded with the status code {code} (injected fault)"
    details: Body = {}
    headers: dict[str, str] = {}
    if retry_after:
        details["retryAfterSeconds"] = retry_after
        headers["Retry-After"] = str(retry_after)
    return ApiError(code, reason, text, details or None, headers)


def go_value(value: Any) -> str:
    """Render a value the way field.Error.ErrorBody does (Go's %v, %q or JSON)."""
    if value is None:
        return '"null"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isfinite(value) and value == int(value) and abs(value) < 1e21:
            return str(int(value))
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


@dataclass(frozen=True)
class FieldError:
    """One entry of an Invalid error: apimachinery's field.Error."""

    type: str
    field: str
    bad_value: Any = ""
    detail: str = ""

    _BARE = frozenset(
        {"FieldValueRequired", "FieldValueForbidden", "FieldValueTooLong", "InternalError"}
    )
    _WORDS = {
        "FieldValueNotFound": "Not found",
        "FieldValueRequired": "Required value",
        "FieldValueDuplicate": "Duplicate value",
        "FieldValueInvalid": "Invalid value",
        "FieldValueNotSupported": "Unsupported value",
        "FieldValueForbidden": "Forbidden",
        "FieldValueTooLong": "Too long",
        "FieldValueTooMany": "Too many",
        "InternalError": "Internal error",
        "FieldValueTypeInvalid": "Invalid value",
    }

    def body(self) -> str:
        words = self._WORDS.get(self.type, self.type)
        text = words if self.type in self._BARE else f"{words}: {go_value(self.bad_value)}"
        return f"{text}: {self.detail}" if self.detail else text

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}"


def required(path: str, detail: str = "") -> FieldError:
    return FieldError("FieldValueRequired", path, "", detail)


def invalid(path: str, value: Any, detail: str) -> FieldError:
    return FieldError("FieldValueInvalid", path, value, detail)


def forbidden_field(path: str, detail: str) -> FieldError:
    return FieldError("FieldValueForbidden", path, "", detail)


def invalid_object(group: str, kind: str, name: str, errors: list[FieldError]) -> ApiError:
    """422 Invalid, with the aggregated message kube builds (duplicates collapsed)."""
    seen: list[str] = []
    for error in errors:
        text = str(error)
        if text not in seen:
            seen.append(text)
    summary = seen[0] if len(seen) == 1 else "[" + ", ".join(seen) + "]"
    target = f"{qualified(kind, group)} {json.dumps(name)}"
    causes = [{"reason": e.type, "message": e.body(), "field": e.field} for e in errors]
    return ApiError(
        422,
        "Invalid",
        f"{target} is invalid: {summary}" if seen else f"{target} is invalid",
        _details(group, kind, name, causes=causes),
    )
