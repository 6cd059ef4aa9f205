"""Request validation and the OpenAPI 3.1 document, both from one declaration beside each route.

    @blueprint.post("/actions/<action_id>/approve")
    @require_key(write=True)
    @operation(summary="Approve a ready action", body=ApproveBody, responses={200: ApproveResult}, errors=(404, 409))
    def approve(action_id: str, body: ApproveBody) -> Response:
        ...
        return respond(ApproveResult(...))  # api/responses.py: the declared model, nothing else

`operation` validates the query string and JSON body with the declared pydantic models (400 with
a message naming the field, rendered in the surface's error shape) and passes the parsed models
to the view as `query=` and `body=`. `build_document` walks the app's url_map and turns the same
models into the OpenAPI document (pydantic's JSON Schema 2020-12 is OpenAPI 3.1's schema
dialect), so the document lists exactly the routes this process serves: `/openapi.json` on a
process serving one surface is that surface's document. `require_key` marks the views it guards,
so security and the 401/403 answers are documented from the decorator that enforces them.
"""

from api.openapi.document import build_document, documented_rules, openapi_path, surface_of
from api.openapi.serve import Health, NotReady, register_openapi
from api.openapi.validation import AUTH_ATTR, OPERATION_ATTR, Operation, operation

__all__ = [
    "AUTH_ATTR",
    "OPERATION_ATTR",
    "Health",
    "NotReady",
    "Operation",
    "build_document",
    "documented_rules",
    "openapi_path",
    "operation",
    "register_openapi",
    "surface_of",
]
