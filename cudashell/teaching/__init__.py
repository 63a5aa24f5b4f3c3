"""What a course uses: advice, lessons, demos, reference figures and grading."""
