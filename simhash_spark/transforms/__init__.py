"""DataFrame → DataFrame transforms: no I/O. Only ``components`` runs actions (it iterates to a fixpoint)."""
