"""Training and evaluation loops."""
from .ddp import cpu_safe_ddp, create_ddp_model
from .trainer import PhraseTrainer
