"""Reading and writing files: the input gate, field checks, the documents and the inventory, atomic writes. What lives
here, and what may import it: README.md."""
