//! Building a corpus from files other tools write. (filled in below)
