"""The scheduling framework: extension-point protocols, status values, registry, profiles, runtime."""
