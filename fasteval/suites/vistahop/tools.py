"""VistaHop's reverse image search: offline, from the results the dataset ships with each task.

The reference never searches live; it replays ``image_search_title_list`` and
``image_search_thumbnail_list``. The loader put titles and thumbnail refs in Task.metadata, so
the tool only lays them out: "Title i: ..." then "Thumbnail i: " followed by the thumbnail.
Where each image goes is recorded as offsets into the text (``extra["image_offsets"]``) so the
suite can interleave images and text in the <tool_response> message exactly as the reference.
"""

from __future__ import annotations

from typing import Any, ClassVar

from fasteval.suites.vistahop.loader import IMAGE_SEARCH_MAX_RESULTS
from fasteval.tools.base import Tool, ToolContext, ToolResult, register_tool

NO_RESULTS = "No matching images were found."
HEADER = "Reverse Image Search Results:"


@register_tool
class ImageSearchTool(Tool):
    """Replays the dataset's reverse-image-search results for the task's image."""

    name: ClassVar[str] = "image_search_tool"
    description: ClassVar[str] = (
        "Perform a reverse image search to find similar images and related information. This can help "
        "identify objects, places, or find more context about the image."
    )
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}, "required": []}

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        cap = int(self.options.get("max_results", IMAGE_SEARCH_MAX_RESULTS))
        meta = ctx.task.metadata
        titles = list(meta.get("image_search_titles") or [])[:cap]
        thumbs = list(meta.get("image_search_thumbnails") or [])[:cap]
        # The reference answers "no results" unless both lists are non-empty.
        if not titles or not thumbs:
            return ToolResult(status="ok", output=NO_RESULTS, extra={"results": 0})
        text = HEADER
        images: list[str] = []
        offsets: list[int] = []
        for i, title in enumerate(titles):
            text += f"\n\nTitle {i + 1}: {title}\nThumbnail {i + 1}: "
            ref = thumbs[i] if i < len(thumbs) else None
            if ref is not None and ref in ctx.blobs:
                images.append(ref)
                offsets.append(len(text))
        return ToolResult(status="ok", output=text, images=images,
                          extra={"results": len(titles), "image_offsets": offsets})
