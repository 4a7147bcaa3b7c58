"""Models shared by every method: mention inputs, the trainable mention encoder, the token-id cache."""
from .inputs import REPRESENTATIONS, ModelInput, check_span, collate
from .mention_encoder import MentionEncoder, model_name, model_shape, resolve_model

__all__ = ["REPRESENTATIONS", "MentionEncoder", "ModelInput", "check_span", "collate", "model_name", "model_shape",
           "resolve_model"]
