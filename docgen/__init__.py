"""What builds the documentation site's generated parts (``mkdocs.yml`` names ``docgen/hooks.py``)."""
