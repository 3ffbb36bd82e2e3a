import DepotCore
