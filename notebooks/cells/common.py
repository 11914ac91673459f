"""What the notebooks share: the cell type, and the closing note on using a real model."""

from __future__ import annotations

from typing import Literal, TypeAlias

Cells: TypeAlias = list[tuple[Literal["md", "code"], str]]
"""A notebook as cells: ``("md", markdown)`` or ``("code", source)``, in order."""

SWITCH = """**With a real model.** Everything here runs offline on `ScriptedProvider`. To use a real
model, set its key and swap the provider; nothing else changes:

```python
import os; os.environ["ANTHROPIC_API_KEY"] = "..."   # or OPENAI_API_KEY / GEMINI_API_KEY
from loom_nb import AnthropicProvider, OpenAIProvider, GeminiProvider
provider = AnthropicProvider("claude-sonnet-4-5")     # OpenAIProvider("gpt-4o"), GeminiProvider("gemini-2.5-flash")
```"""
