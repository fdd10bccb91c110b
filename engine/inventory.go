package engine

import "github.com/bridge-mcp/bridge/engine/config"

// toolOptions are the run_python entry options of the environment. The
// inventory (MCP_BRIDGE_TOOL_INVENTORY=names) is read from the config
// sources once, when the entry is built at startup: the bridge does not
// advertise tools/list_changed, so a later reload changes which servers
// calls can use but not the listed names until the client restarts the
// bridge.
func (e *Engine) toolOptions() []ToolOption {
	opts := []ToolOption{WithAlwaysLoad(e.Env.AlwaysLoad)}
	if e.Env.ToolInventory == "names" {
		opts = append(opts, WithInventory(Inventory(inventoryOf(config.Load(e.configOptions())))))
	}
	return opts
}

// inventoryOf lists a config set's servers in config order.
func inventoryOf(set config.Set) []InventoryServer {
	out := make([]InventoryServer, 0, len(set.Entries))
	for _, en := range set.Entries {
		out = append(out, InventoryServer{Name: en.Name, Description: en.Description})
	}
	return out
}
