"""``atualizar_cadastro``: update address/phone/e-mail of the customer's own record."""
