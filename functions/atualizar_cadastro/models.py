from __future__ import annotations

from typing import Annotated

import phonenumbers
from pydantic import AfterValidator, EmailStr, TypeAdapter

from cadencia_shared.catalog import ProfileFieldsArguments
from cadencia_shared.models import Email, PhoneE164, ToolRequest


def _brazilian_e164(value: str) -> str:
    try:
        number = phonenumbers.parse(value, None)
    except phonenumbers.NumberParseException:
        raise ValueError("telefone deve estar no formato E.164, por exemplo +5511987654321") from None
    if phonenumbers.region_code_for_number(number) != "BR" or not phonenumbers.is_valid_number(number):
        raise ValueError("telefone não é um número brasileiro válido")
    if phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164) != value:
        raise ValueError("telefone deve estar no formato E.164, por exemplo +5511987654321")
    return value


# The shared types (what the orchestrator also checks), narrowed with what needs the
# tool's own libraries: a valid Brazilian number, a deliverable-looking address.
_EMAIL = TypeAdapter(EmailStr)
BrazilianPhone = Annotated[PhoneE164, AfterValidator(_brazilian_e164)]
ValidEmail = Annotated[Email, AfterValidator(lambda v: str(_EMAIL.validate_python(v)))]


class ProfileFields(ProfileFieldsArguments):
    telefone: BrazilianPhone | None = None
    email: ValidEmail | None = None


class ProfileUpdateRequest(ToolRequest):
    campos: ProfileFields
