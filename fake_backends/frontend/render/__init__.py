"""Response bodies and stream chunks, shaped as the real 1.6.1 frontend shapes them."""
