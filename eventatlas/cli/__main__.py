"""``python -m eventatlas.cli`` (also under ``accelerate launch -m`` / ``torchrun -m``)."""
from . import app

app()
