"""What the project shows a reader: the explorer page (explore.py), docs/side-by-side.md
(side_by_side.py) and the √d_k plot (sqrt_dk.py)."""
