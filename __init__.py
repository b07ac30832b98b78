from .addon import register as register
from .addon import unregister as unregister
