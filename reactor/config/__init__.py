"""The settings: the policy file and REACTOR_* variables read, validated and merged, all problems at once."""
