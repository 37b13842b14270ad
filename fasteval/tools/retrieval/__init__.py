"""Retrieval tools: web search, page reading, VistaHop's summarising search, historical weather.

Importing this package registers ``web_search`` (alias ``google_search``), ``browser_get_page_text``,
``text_search_tool`` and ``historical_weather``. Each is a real client of its upstream, bounded by
timeouts, retries and size caps, and cached in the ``search``/``page``/``summary`` namespaces.
"""

from fasteval.tools.retrieval.browse import BrowserGetPageText, read_page
from fasteval.tools.retrieval.page import FetchLimits, PageSkipped, extract_text, fetch_page
from fasteval.tools.retrieval.search import GoogleSearch, WebSearch
from fasteval.tools.retrieval.text_search import TextSearchTool
from fasteval.tools.retrieval.transport import RetrySettings, UpstreamError
from fasteval.tools.retrieval.weather import HistoricalWeather

__all__ = [
    "BrowserGetPageText",
    "FetchLimits",
    "GoogleSearch",
    "HistoricalWeather",
    "PageSkipped",
    "RetrySettings",
    "TextSearchTool",
    "UpstreamError",
    "WebSearch",
    "extract_text",
    "fetch_page",
    "read_page",
]
