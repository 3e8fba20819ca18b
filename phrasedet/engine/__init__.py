"""Training and evaluation loops."""
from .ddp import cpu_safe_ddp, create_ddp_model, finish_distributed
from .trainer import PhraseTrainer
from .recipe import build_recipe_model, run_recipe
