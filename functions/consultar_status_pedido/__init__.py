"""``consultar_status_pedido``: read-only status of the customer's own order."""
