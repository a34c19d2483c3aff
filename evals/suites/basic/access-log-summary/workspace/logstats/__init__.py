"""Summaries of web-server access logs (Common Log Format)."""

from logstats.parse import Record, parse_line
from logstats.report import Summary, summarize

__all__ = ["Record", "Summary", "parse_line", "summarize"]
