"""The notebook layer: widgets over the pure renderer (imports ipywidgets and anywidget)."""

from loom_nb.widgets._promptpad import PromptPad
from loom_nb.widgets._stepper import ReplayStepper
from loom_nb.widgets._transcript import TranscriptView
from loom_nb.widgets._upload import MediaUpload

__all__ = ["MediaUpload", "PromptPad", "ReplayStepper", "TranscriptView"]
