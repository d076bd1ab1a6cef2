"""engines: what each serving engine is: its scheduler profile, the strategies it runs."""
