"""Tasks: the normalized model (model.py) and the loaders that produce it (loader.py is the entry
point: load_task, load_tasks; harbor.py, endless.py and apptainer.py read the formats,
harbor_compose.py a Harbor task's docker-compose file, harbor_schema.py
the keys task.toml may hold; hashing.py says when a task changed)."""
