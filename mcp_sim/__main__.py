from mcp_sim.cli import main

main()
