"""Training and evaluation loops for every task family, paper 003's staged recipe, optimizers and hooks."""
from .ddp import cpu_safe_ddp, create_ddp_model, finish_distributed
from .feature_extraction import extract_image_features
from .hooks import BackboneUnfreezeHook
from .optimizer import build_optimizer, with_global_norm_clipping
from .recipe import build_recipe_model, run_recipe
from .trainer import PhrasedetTrainer, PhraseTrainer, dataset_task
