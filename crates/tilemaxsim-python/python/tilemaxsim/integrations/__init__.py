"""Drop-ins with the originals' signatures and semantics: `pylate` (colbert_scores, ...),
`colbert` (colbert-ai's colbert_score, colbert_score_packed), `flash_maxsim` and `colpali`.
Each module's `patch()` makes the installed original call ours; `unpatch()` undoes it."""
