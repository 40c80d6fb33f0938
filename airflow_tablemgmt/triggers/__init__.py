"""Deferrable triggers: snapshot watchers for AssetWatcher and the snapshot sensor."""
