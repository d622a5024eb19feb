from __future__ import annotations

from typing import Annotated

import phonenumbers
from pydantic import AfterValidator, BaseModel, ConfigDict, EmailStr, StringConstraints, model_validator

from cadencia_shared.models import ToolRequest


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


BrazilianPhone = Annotated[str, AfterValidator(_brazilian_e164)]
Address = Annotated[str, StringConstraints(strip_whitespace=True, min_length=5, max_length=300, pattern=r"^[^\x00-\x1f\x7f]+$")]


class ProfileFields(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    endereco: Address | None = None
    telefone: BrazilianPhone | None = None
    email: EmailStr | None = None

    @model_validator(mode="after")
    def _at_least_one(self) -> ProfileFields:
        if not self.changes():
            raise ValueError("informe ao menos um campo: endereco, telefone ou email")
        return self

    def changes(self) -> dict[str, str]:
        return {k: v for k, v in self.model_dump().items() if v is not None}


class ProfileUpdateRequest(ToolRequest):
    campos: ProfileFields
