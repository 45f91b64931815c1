"""Hostile text used across tests: every model output and context may carry markup or script."""

XSS_QUESTION = "<script>alert('q')</script>¿Cuánto ácido fólico?"
XSS_CONTEXT = "<img src=x onerror=alert(1)> Se recomienda 0,4 mg diarios. <a href=\"javascript:alert(2)\">guía</a>"
XSS_ANSWER = "Tome 0,4 mg al día. <script>alert('a')</script> Consulte <a href=\"javascript:alert(3)\">aquí</a>."
