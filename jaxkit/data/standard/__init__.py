"""Standard benchmark instances for Ballad's problem families, shipped small (see
``README.md`` beside this file for the sources, licences and how they were converted)."""
