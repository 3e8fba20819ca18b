"""Training and evaluation loops for every task family, the staged-training mechanism (paper 003's
recipe, paper 001's two stages), optimizers and hooks."""
from .ddp import cpu_safe_ddp, create_ddp_model, finish_distributed
from .feature_extraction import extract_image_features
from .hooks import BackboneUnfreezeHook
from .optimizer import build_optimizer, with_global_norm_clipping
from .staged.recipe import build_recipe_model, run_recipe
from .staged.retrieval_stages import run_retrieval_stages
from .staged.selected_training import run_selected, selection_of
from .trainer import PhrasedetTrainer, PhraseTrainer, dataset_task
