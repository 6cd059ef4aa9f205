"""Dashboard forms read through declared models, as v1 reads its JSON bodies (`operation(body=...)`).

A page declares its form as a `DashboardForm` model beside its routes. The fields say what is read (a
`list[...]` field reads every value of a repeated input, such as checkboxes); `before` validators
turn what a browser sends into the value meant (`Stripped`, `Checkbox`); field validators that
start with `checking(info)` refuse with `refuse(...)`, the exact sentence the page shows beside
the field. `read_form` answers the form as typed (normalised: what the page shows again) and the
refusals by field, so a view reads one object instead of `request.form.get(...)` by hand.

The form as typed is read a second time without the checks when some check refused (a normalising
validator never refuses), because the page is shown again with every field as the operator left
it, the valid ones and the refused ones alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Generic, TypeVar, get_origin

from flask import request
from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError, ValidationInfo
from pydantic_core import PydanticCustomError


class DashboardForm(BaseModel):
    """The base of every dashboard form. Defaults are validated too: a field the browser did not
    send (an empty reason's textarea left out, no checkbox ticked) is checked like an empty one."""

    model_config = ConfigDict(validate_default=True)


M = TypeVar("M", bound=DashboardForm)

# The validation context key under which the checks are skipped (the second, as-typed read).
_UNCHECKED = "flokit.dashboard.unchecked"


def _strip(value: Any) -> Any:
    return value.strip() if isinstance(value, str) else value


# A text input, without the blanks around it.
Stripped = Annotated[str, BeforeValidator(_strip)]
# A checkbox: checked is "on" (the browser's value when the input has none); absent is unchecked.
Checkbox = Annotated[bool, BeforeValidator(lambda value: value == "on")]


@dataclass(frozen=True)
class FormRead(Generic[M]):
    """A submitted form: its values as typed (checked only when `errors` is empty) and the first
    refusal of each refused field, in the page's own words."""

    values: M
    errors: dict[str, str]


def checking(info: ValidationInfo) -> bool:
    """Whether a field validator should check (False on the as-typed read after a refusal)."""
    return not (info.context or {}).get(_UNCHECKED, False)


def refuse(message: str) -> PydanticCustomError:
    """The refusal a check raises: `message` is shown beside the field as it is."""
    return PydanticCustomError("dashboard_form", "{message}", {"message": message})


def read_form(model: type[M], **context: Any) -> FormRead[M]:
    """The POSTed form through `model`; `context` reaches the checks (`info.context`). A field the
    form does not carry takes the model's default."""
    data: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        key = field.alias or name
        if key in request.form:
            data[name] = request.form.getlist(key) if get_origin(field.annotation) is list else request.form[key]
    try:
        return FormRead(model.model_validate(data, context=context), {})
    except ValidationError as exc:
        errors: dict[str, str] = {}
        for error in exc.errors():
            errors.setdefault(str(error["loc"][0]) if error["loc"] else "", error["msg"])
        return FormRead(model.model_validate(data, context={**context, _UNCHECKED: True}), errors)
