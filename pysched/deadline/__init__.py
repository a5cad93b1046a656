"""What the deadline plugins share: the predictor and the `pysched.io/Deadline` condition."""
