"""Reading a table: what a read does (``plan.py``, pure), the log read by a confluent-kafka consumer
(``consumer.py``), folding and comparing (``fold.py``, pure) and ``verify`` (``verify.py``)."""
