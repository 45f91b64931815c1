"""Production traces in: OTLP (JSON, JSONL, protobuf) and Langfuse exports become sampled RAG samples.

decode.py reads the encodings into spans (one function for a file and a request body: the
OTLP/HTTP receiver is meant to reuse it), mapping.py turns a trace into a sample record or a
skip reason, importer.py samples, compares with the dataset and writes through the samples
import. docs/formats.md, "Traces", has the formats, the mapping table and the sampling rule.
"""

from calibrate.ingest.traces.decode import FORMATS, Decoded, LangfuseTrace, Span, decode, detect_format, spans_of_traces_data
from calibrate.ingest.traces.importer import (
    SETTLED_KEYS,
    SUMMARY_KEYS,
    TracesSummary,
    import_traces,
    inclusion_u,
    read_feedback,
)
from calibrate.ingest.traces.mapping import HINTS, map_langfuse, map_spans

__all__ = ["FORMATS", "HINTS", "SETTLED_KEYS", "SUMMARY_KEYS", "Decoded", "LangfuseTrace", "Span", "TracesSummary", "decode", "detect_format",
           "import_traces", "inclusion_u", "map_langfuse", "map_spans", "read_feedback", "spans_of_traces_data"]
