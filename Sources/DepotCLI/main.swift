import Depot
print("depot")
