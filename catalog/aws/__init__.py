"""Everything the catalog knows from AWS: the live refresh (refresh.py) through AWS's APIs (call.py),
DescribeInstanceTypes records made InstanceTypes (describe.py), the per-family hardware facts AWS
publishes (families.py), the Spot Instance Advisor data (spot_advisor.py) and the default regions
(regions.py). Nothing here is imported until a module is asked for: boto3 is slow to import."""
