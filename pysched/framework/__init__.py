"""The plugin SDK: extension-point protocols, Handle, Status, CycleState, events and hints,
registry, profiles, the node table, the fused-kernel contract, ClusterBackend and Clock."""
