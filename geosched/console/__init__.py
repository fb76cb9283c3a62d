"""What a command takes and shows: settings, shared options, the output contract, rendering and redaction. What lives
here, and what may import it: README.md."""
