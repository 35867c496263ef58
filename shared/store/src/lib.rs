//! On-disk coordination state of RooCode Teams (see `docs/PROTOCOL.md`).
