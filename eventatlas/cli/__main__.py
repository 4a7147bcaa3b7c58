"""``python -m eventatlas.cli`` (also under ``accelerate launch -m`` / ``torchrun -m``)."""
from . import app  # the package, so that every command is registered

app()
