"""The model of a session: buffers, streams, events, the trace and its GPU operations, the rules both backends follow (who blocks, launch shapes), settings. No CUDA, no terminal."""
