"""The Triton models, one folder each: thin model.py adapters that convert Triton objects and
call the logic of text/, engine_step/ and engines/.  A rendered repository's model.py imports
`model_repository.models.<model>.model`."""
